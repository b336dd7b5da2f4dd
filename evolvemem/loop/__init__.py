"""The AutoResearch loop: evaluate → diagnose → propose → guard, one versioned round at a time."""
