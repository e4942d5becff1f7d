"""The admin APIs a broker serves: CreateTopics/DeleteTopics/CreatePartitions forwarded to
the controller (admin_api), Create/Describe/DeleteAcls (acls_api), DescribeConfigs and
IncrementalAlterConfigs (configs_api), DescribeQuorum forwarded to the voters
(quorum_api), Metadata v0-v12 and DescribeCluster from the broker's image by topic ID
(metadata_api). Each checks its ACLs before it acts.
"""
