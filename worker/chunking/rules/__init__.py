"""The rule strategies (``sentence``, ``adaptive``, ``lexical``): text in, chunks out, in one
call, no model. Each owns its parameters Struct; the registry (``strategies.py``) builds them."""
