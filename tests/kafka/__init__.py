"""Tests of worker.kafka: clients, the link to Kafka, membership and the publisher, over fakes
and stand-ins (the tests that need a real broker are in tests/broker)."""
