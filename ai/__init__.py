"""evennia-ai: an LLM assistant NPC for Evennia whose context never overflows.

litellm fetches a model cost map from the internet when it is imported unless told not
to; nothing of this package may reach the network, so the switch is set here, before any
module can import litellm.
"""

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
