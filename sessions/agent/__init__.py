"""The agent: the tool-using loop that answers a turn, and the workspace tools it may call."""
