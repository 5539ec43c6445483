"""Autoscaling the worker fleet on backlog per instance: policies, actuators, simulator."""
