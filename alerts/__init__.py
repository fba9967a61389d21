"""Recording and alert rules as data, rendered to Prometheus and Kubernetes YAML."""
