"""The game-day simulator: synthetic vLLM servers, GPUs and business traffic driven by scenario files.

``scenario`` reads and validates the files in ``scenarios/``; ``engine`` models one
vLLM engine's counters, gauges and histograms and renders its ``/metrics`` page with
the families, labels and buckets of real vLLM 0.32; ``simulation`` runs scenarios
side by side (vLLM servers, a sidecar per scenario on the fake NVML, events posted
to it); ``gameday`` adds the monitoring stack and reports which alerts fired.
"""
