"""Tests of worker.kafka: clients, reachability and the publisher, over fakes and stand-ins
(the tests that need a real broker are in tests/broker)."""
