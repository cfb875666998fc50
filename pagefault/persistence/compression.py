"""Checkpoints stored compressed: the serializer pagefault's SQLite and Postgres checkpointers use.

LangGraph's serializer (``JsonPlusSerializer``) turns a checkpoint, a blob or a write into typed bytes;
``CompressedSerializer`` zlib-compresses those bytes and marks the type (``msgpack`` becomes
``msgpack+zlib``), the way LangGraph's ``EncryptedSerializer`` marks what it encrypted, whose shape it
reuses (so the checkpointers' msgpack allowlist still reaches the inner serializer). Values smaller
than ``MIN_BYTES`` stay as they are (``+raw``). Data written before, with unmarked types, is read as it
was: nothing needs migrating.
"""

from __future__ import annotations

import zlib

from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

#: Values smaller than this many bytes are stored uncompressed.
MIN_BYTES = 200
_LEVEL = 6


class ZlibCodec:
    """The byte transform of ``CompressedSerializer``, in the shape of LangGraph's ``CipherProtocol``."""

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        """``(name, bytes)``: ``zlib`` and the compressed bytes, or ``raw`` and the bytes themselves when
        they are small or do not shrink."""
        if len(plaintext) >= MIN_BYTES:
            packed = zlib.compress(plaintext, _LEVEL)
            if len(packed) < len(plaintext):
                return "zlib", packed
        return "raw", plaintext

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        """The bytes ``encrypt`` was given."""
        if ciphername == "zlib":
            return zlib.decompress(ciphertext)
        if ciphername == "raw":
            return ciphertext
        raise ValueError(f"checkpoint data marked {ciphername!r}: neither zlib nor raw (written by something else?)")


class CompressedSerializer(EncryptedSerializer):
    """LangGraph's serializer, its output zlib-compressed (see the module docstring)."""

    def __init__(self, serde: JsonPlusSerializer | None = None) -> None:
        super().__init__(ZlibCodec(), serde or JsonPlusSerializer())


def checkpoint_serializer() -> CompressedSerializer:
    """The serializer every pagefault checkpointer is made with (and a reader of its files must use)."""
    return CompressedSerializer()
