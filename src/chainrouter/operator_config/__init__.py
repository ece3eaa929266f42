"""The operator configuration file applied by `chainrouter apply FILE.yaml`."""
