"""A scripted reference agent behind the OpenAI chat API. Not an LLM: a baseline and
a smoke-test partner that plays the lightweight environments from the conversation text."""
