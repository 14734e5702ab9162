"""Drop-in faces for code written against other memory libraries (``memstrata.compat.mem0``)."""
