"""``python -m memstrata.providers.llama_server [llama_cpp.server options]``: llama-cpp-python's
OpenAI-compatible server with llama.cpp's extra CPU buffer types turned off.

The extra buffer types are llama.cpp's weight repacking for special CPU instructions,
AMX among them. On a CPU that announces AMX inside a virtual machine the AMX matrix
product can fault (seen with llama-cpp-python 0.3.36: a general protection fault in
``ggml_backend_amx_mul_mat`` on the first completion, the server gone without an
answer). The small models :class:`~memstrata.providers.local.LocalLLMServer` serves
gain little from repacking, so they always load without it. llama-cpp-python has no
option for this (``llama_model_params.use_extra_bufts``), hence the default params are
wrapped in this process only before its server starts.
"""

from __future__ import annotations

from typing import Any

__all__ = ["main"]


def main() -> None:
    import llama_cpp.llama_cpp as bindings  # what llama_cpp.Llama reads its defaults from
    from llama_cpp.server.__main__ import main as serve

    defaults = bindings.llama_model_default_params

    def without_extra_buffer_types() -> Any:
        params = defaults()
        if hasattr(params, "use_extra_bufts"):  # older llama.cpp builds have none
            params.use_extra_bufts = False
        return params

    bindings.llama_model_default_params = without_extra_buffer_types
    serve()


if __name__ == "__main__":
    main()
