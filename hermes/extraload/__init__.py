"""Extra load: what external users do to the processors (thesis §10.1, Fig. 10.12).

Today: capacity schedules per phase (thesis Table 10.6). Next: external tasks given as
(data, work, wait) triples that compete with the application for CPU and network.
"""

from hermes.extraload.schedule import CapacitySchedule, read_schedule_csv

__all__ = ["CapacitySchedule", "read_schedule_csv"]
