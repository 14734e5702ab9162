"""L3 semantic memory, the pure part of the write path.

``extract`` → ``credibility.screen`` → ``decide`` → ``apply_decision``: every stage is a
function over values; the store applies the resulting rows in one transaction. Decay,
eviction, feedback, forget requests and the core profile live here too.
"""

from .credibility import Assessment, CredibilityConfig, Screened, assess, screen, write_score
from .decide import (Action, DecayConfig, DecideConfig, Decision, FeedbackConfig, Neighbor,
                     apply_decision, apply_feedback, decay, decide, evict, forget_request,
                     memory_value, to_item)
from .extract import Candidate, cardinality, extract, extract_text
from .profile import Profile, aggregate, render

__all__ = [
    "Candidate", "extract", "extract_text", "cardinality",
    "CredibilityConfig", "Assessment", "Screened", "assess", "screen", "write_score",
    "Action", "Decision", "Neighbor", "DecideConfig", "decide", "to_item", "apply_decision",
    "forget_request", "DecayConfig", "decay", "memory_value", "evict",
    "FeedbackConfig", "apply_feedback",
    "Profile", "aggregate", "render",
]
