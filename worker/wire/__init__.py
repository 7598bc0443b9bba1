"""The wire contract: what goes over Kafka and how.

The event Structs (schema version 1, fields only ever added), bytes <-> events with the input's
faults typed, table rows mapped onto documents, content-addressed chunk ids and the events built
from a chunking, the one-pass encoder of a document's chunk events, W3C trace context carried
from a document to its events, and the JSON Schemas and AsyncAPI document generated into
``schemas/``. Pure: no I/O.
"""
