"""Stand-ins for what cannot run here: NVML without a GPU, PagerDuty without the internet."""
