"""SASL on Kafka connections: the server side of the exchange (sasl_api), its settings
and JAAS keys (sasl_settings), SCRAM-SHA-256/512 both ways (scram), the SCRAM credential
APIs (scram_api) and the client side used by the replica fetcher and kraft's tools
(sasl_client).
"""
