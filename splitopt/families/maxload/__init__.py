"""The maxload family (problem ``maxload``): the peer dnn-partitioning placement benchmark."""
