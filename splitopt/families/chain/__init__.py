"""The chain family (problem ``chain``, JMSNAS Eq. 1 on a DAG): layers over devices in a line."""
