"""The worker daemon: Elastic Beanstalk sqsd semantics over any SQS endpoint, and better."""

from conveyor.worker.config import ConfigError, WorkerConfig, load_config
from conveyor.worker.daemon import Worker

__all__ = ["ConfigError", "Worker", "WorkerConfig", "load_config"]
