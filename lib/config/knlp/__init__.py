"""The original project's (mcgrof/knlp) GPT-2 configurations, loaded as the experiments they are there."""
