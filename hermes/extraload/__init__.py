"""Extra load: what external users do to the processors and the network (thesis §10.1, Fig. 10.12).

- :mod:`.schedule` — capacity schedules per phase (thesis Table 10.6), declared;
- :mod:`.tasks` — external task scripts of (Data, Work, Wait) triples (YAML or CSV);
- :mod:`.sharing` — their deterministic effect under the virtual clock (processor sharing of the CPU,
  bandwidth sharing of the links), charged by :class:`hermes.runtime.clock.VirtualClock`;
- :mod:`.real` — the same tasks as real processes under the wall clock (never left behind).
"""

from hermes.extraload.real import RealLoad, RealLoadError
from hermes.extraload.schedule import CapacitySchedule, read_schedule_csv
from hermes.extraload.sharing import ExtraLoadError, ProcessorLoad, make_loads
from hermes.extraload.tasks import Step, Task, check_tasks, load_tasks, parse_tasks

__all__ = ["CapacitySchedule", "read_schedule_csv", "Step", "Task", "load_tasks", "parse_tasks", "check_tasks",
           "ProcessorLoad", "make_loads", "ExtraLoadError", "RealLoad", "RealLoadError"]
