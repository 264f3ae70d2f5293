"""The iteration order of a CPython set of str as under ``PYTHONHASHSEED=0``.

AgentGym's TextCraft server lists its crafting commands by iterating Python sets
of strings, so their order is a function of the strings' hashes, i.e. of the
server process's hash seed. Its reference behaviour is the one under
``PYTHONHASHSEED=0``. :class:`Seed0StrSet` reproduces that order in any process,
whatever its own hash seed, by re-doing what CPython (3.11 and later) does:

* **hash**: ``hash(s)`` of a str is SipHash-1-3 of the string's code units
  (1, 2 or 4 bytes each, little-endian, by the widest character) with the key
  that ``PYTHONHASHSEED=0`` sets: all zero. -1 becomes -2; the empty string
  hashes to 0.
* **table**: a set starts with 8 slots. A new key goes to slot ``hash & mask``;
  if that is taken, to the next free one of the following 9 slots (when they fit
  before the end of the table), else it jumps to ``(i * 5 + 1 + perturb) & mask``
  with ``perturb`` the hash shifted right by 5 more bits each jump, and tries
  again. When ``5 * filled >= 3 * mask`` after an insertion, the table grows to
  the smallest power of two above 4 x the number of keys, and the keys are put
  into it again in their old slot order.
* **iteration** walks the slots in order.

Only what the TextCraft code does is covered: adding strings and membership; no
removal (so no deleted-slot markers), no set algebra.
"""

from __future__ import annotations

from typing import Iterable, Iterator

_MASK64 = (1 << 64) - 1
_MIN_SIZE = 8
_LINEAR_PROBES = 9
_PERTURB_SHIFT = 5


def _rotl(x: int, bits: int) -> int:
    return ((x << bits) | (x >> (64 - bits))) & _MASK64


def _sipround(v0: int, v1: int, v2: int, v3: int) -> tuple[int, int, int, int]:
    v0 = (v0 + v1) & _MASK64
    v2 = (v2 + v3) & _MASK64
    v1 = _rotl(v1, 13) ^ v0
    v3 = _rotl(v3, 16) ^ v2
    v0 = _rotl(v0, 32)
    v2 = (v2 + v1) & _MASK64
    v0 = (v0 + v3) & _MASK64
    v1 = _rotl(v1, 17) ^ v2
    v3 = _rotl(v3, 21) ^ v0
    v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


def siphash13(data: bytes, k0: int = 0, k1: int = 0) -> int:
    """SipHash-1-3 of ``data`` (unsigned 64-bit), one compression and three
    finalisation rounds, as CPython's ``Python/pyhash.c``."""
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573
    whole = len(data) - len(data) % 8
    for start in range(0, whole, 8):
        m = int.from_bytes(data[start:start + 8], "little")
        v3 ^= m
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        v0 ^= m
    last = ((len(data) & 0xFF) << 56) | int.from_bytes(data[whole:], "little")
    v3 ^= last
    v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    v0 ^= last
    v2 ^= 0xFF
    for _ in range(3):
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


def _code_units(text: str) -> bytes:
    widest = max(map(ord, text), default=0)
    if widest < 0x100:
        return text.encode("latin-1")
    if widest < 0x10000:
        return text.encode("utf-16-le")
    return text.encode("utf-32-le")


def seed0_hash(text: str) -> int:
    """``hash(text)`` in a CPython >= 3.11 process started with ``PYTHONHASHSEED=0``."""
    if not text:
        return 0
    value = siphash13(_code_units(text))
    if value >= 1 << 63:
        value -= 1 << 64
    return -2 if value == -1 else value


class Seed0StrSet:
    """A set of str that iterates in the order a ``PYTHONHASHSEED=0`` CPython set would.

    Built by :meth:`add` calls in the same order as the set it stands for (the
    order matters when hashes collide in the table)."""

    def __init__(self, items: Iterable[str] = ()) -> None:
        self._table: list[tuple[int, str] | None] = [None] * _MIN_SIZE
        self._used = 0
        for item in items:
            self.add(item)

    def __len__(self) -> int:
        return self._used

    def __iter__(self) -> Iterator[str]:
        return (entry[1] for entry in self._table if entry is not None)

    def __contains__(self, item: object) -> bool:
        return isinstance(item, str) and self._find(item, seed0_hash(item))[1]

    def _find(self, key: str, hashed: int) -> tuple[int, bool]:
        """(slot, found): the slot holding ``key``, or the free slot it would take."""
        table, mask = self._table, len(self._table) - 1
        perturb = hashed & _MASK64
        i = perturb & mask
        while True:
            probes = _LINEAR_PROBES if i + _LINEAR_PROBES <= mask else 0
            for slot in range(i, i + probes + 1):
                entry = table[slot]
                if entry is None:
                    return slot, False
                if entry[0] == hashed and entry[1] == key:
                    return slot, True
            perturb >>= _PERTURB_SHIFT
            i = (i * 5 + 1 + perturb) & mask

    def add(self, key: str) -> None:
        hashed = seed0_hash(key)
        slot, found = self._find(key, hashed)
        if found:
            return
        self._table[slot] = (hashed, key)
        self._used += 1
        mask = len(self._table) - 1
        if self._used * 5 >= mask * 3:
            self._grow(self._used * 2 if self._used > 50000 else self._used * 4)

    def _grow(self, minimum: int) -> None:
        size = _MIN_SIZE
        while size <= minimum:
            size <<= 1
        old, self._table = self._table, [None] * size
        mask = size - 1
        for entry in old:
            if entry is None:
                continue
            perturb = entry[0] & _MASK64
            i = perturb & mask
            while True:
                probes = _LINEAR_PROBES if i + _LINEAR_PROBES <= mask else 0
                free = next((s for s in range(i, i + probes + 1) if self._table[s] is None), None)
                if free is not None:
                    self._table[free] = entry
                    break
                perturb >>= _PERTURB_SHIFT
                i = (i * 5 + 1 + perturb) & mask
