"""What the tests share: servers, queues, workers, processes."""
