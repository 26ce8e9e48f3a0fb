//! The Toxiproxy-compatible control API and Prometheus metrics.
