"""The model side: the OpenAI-compatible endpoint client, endpoint kinds and
launchers (vLLM), and the scripted reference agent."""
