"""The in-process vLLM plugin: per-tier SLO histograms and per-step engine timing.

Two entry points run inside vLLM: ``stat_logger.InfersightStatLogger`` (the
``vllm.stat_logger_plugins`` entry point, in the API-server process) and
``scheduler.TimedScheduler`` (opt-in ``--scheduler-cls``, in the engine-core
process). Everything else here is plain Python with no vLLM import, so it is
testable without vLLM and costs nothing at vLLM startup beyond the config model.
"""
