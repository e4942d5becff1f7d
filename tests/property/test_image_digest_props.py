"""A topic's digest is built from its parts (`TopicImage._canonical_bytes`): each partition
image packed once per content hash and shared by every topic that holds it, as a loaded
snapshot's are. The bytes are exactly `pack(canonical())`, on any image."""

from __future__ import annotations

import hashlib

from hypothesis import given

from metadata.image import MetadataImage
from raft.common.uuid import pack
from tests.support.metadata_strategies import images


@given(image=images())
def test_a_topic_digest_is_the_hash_of_its_canonical_msgpack(image: MetadataImage) -> None:
    packed: dict[int, bytes] = {}  # one for the whole image, as content_hash shares it
    for topic in image.topics.values():
        assert topic._canonical_bytes(packed) == pack(topic.canonical())
        assert topic.digest(packed) == hashlib.sha256(pack(topic.canonical())).digest()
