"""Screening of URLs the service is asked to use: the outbound guard and EVM node checks."""
