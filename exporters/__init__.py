"""The infersight sidecar: collectors registered in one table, served over HTTP."""
