"""Replication between brokers: topic-ID fencing and the hosted partitions' state with
its high watermark (replica), followers fetching from partition leaders by Fetch v13 with
topic IDs (follower), and the leaders' ISR shrinks and expansions through AlterPartition
(isr).
"""
