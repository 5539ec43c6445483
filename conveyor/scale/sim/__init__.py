"""The autoscaling simulator behind `conveyor scale simulate`."""
