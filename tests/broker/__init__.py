"""Real-broker end-to-end tests: each runs the worker against the session's Kafka broker
(marked ``kafka``; CHUNKSTREAM_TEST_BOOTSTRAP points them at a running one)."""
