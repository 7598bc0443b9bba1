"""What the tests share: fakes, generated documents, the corpora, brokers and the checks many
tests apply. A test imports from here (or takes a conftest fixture), never from another test
module; the benchmarks measure on the same corpora and brokers, so they import from here too.
"""
