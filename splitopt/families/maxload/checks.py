"""The maxload family's check. The importer (``instance.parse_peer_instance``) checks each
field's type and range as it reads a peer file and ends with the instance's consistency
(``instance.check_consistency``: node ids unique, every edge between known nodes, one
outgoing cost per node, the sizes within what the memory rows represent exactly, an
acyclic graph); ``MaxloadFamily.check`` asks the latter of any instance, one built in
Python included."""

from __future__ import annotations

from splitopt.families.maxload.instance import MaxloadInstance, check_consistency


def check_maxload(inst: MaxloadInstance) -> None:
    """Raise InvalidInstance (one line naming the field and value; the fields as the peer
    file names them, under ``inst.source``) unless ``inst`` is consistent."""
    check_consistency(inst)
