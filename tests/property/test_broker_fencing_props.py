"""Fencing a broker looks only at the topics it leads in or is in an ISR of
(`metadata.broker_control.topics_involving`): the changes are those a walk of every topic
makes, in the same order, on any image."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from metadata.broker_control import leadership_moves, moves_in
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from tests.support.metadata_strategies import BROKERS, images


@given(image=images(), broker_id=st.sampled_from(BROKERS), unclean_default=st.booleans())
def test_fencing_changes_what_a_walk_of_every_topic_changes(
        image: MetadataImage, broker_id: int, unclean_default: bool) -> None:
    delta = MetadataDelta(image)
    unfenced = set(delta.unfenced_broker_ids()) - {broker_id}
    every_topic = [change for topic in sorted(image.topics.values(),
                                              key=lambda topic: topic.topic_id.value)
                   for change in moves_in(topic, broker_id, unfenced,
                                          unclean_default=unclean_default)]
    assert leadership_moves(delta, broker_id, unclean_default=unclean_default) == every_topic
