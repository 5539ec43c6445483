"""What every long-running client part (worker, cron scheduler, autoscaler) runs on: the
event loop and signals, the status port, presence announcements, extension detection."""
