"""The validation suite: each claim of the theory held against simulation (``nqm validate``)."""
