"""A Python client of convstate for gateway authors.

    from convstate_client import ConvStateClient

    client = ConvStateClient.from_env()
    view = client.before_inference("conv-1", [{"role": "user", "content": "Hi"}], model="gpt-4o")
    answer = provider.chat.completions.create(model="gpt-4o", messages=view.messages)
    client.after_inference("conv-1", answer.choices[0].message, answer.usage)

The generated modules (clients/python/generate) must be on the import path.
"""

from .client import (
    DEFAULT_ADDRESS,
    ConvStateClient,
    InferenceContext,
    is_loopback,
    new_idempotency_key,
)
from .errors import ConfigurationError, ConvStateError
from .formats import AnthropicRequest, to_anthropic, to_openai
from .messages import items_from_messages, usage_from_provider

__all__ = [
    "DEFAULT_ADDRESS",
    "AnthropicRequest",
    "ConfigurationError",
    "ConvStateClient",
    "ConvStateError",
    "InferenceContext",
    "is_loopback",
    "items_from_messages",
    "new_idempotency_key",
    "to_anthropic",
    "to_openai",
    "usage_from_provider",
]
