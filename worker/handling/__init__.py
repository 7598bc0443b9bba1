"""Handling one input record: decode, decide against the document's state, chunk, publish,
remember — or a dead letter, or nothing for a replay.

Records of one document are handled one at a time in offset order (``turns``); the strategy a
document asks for is resolved and cached (``resolver``).
"""
