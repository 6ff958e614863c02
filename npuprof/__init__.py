"""npuprof: profile PyTorch training without editing the training script."""

__version__ = "0.1.0"

# The one environment variable that carries the whole configuration to child processes.
ENV_CONFIG = "NPUPROF_CONFIG"
