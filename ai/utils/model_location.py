"""Telling whether a model is served on this machine or a private network, not by a host.

A model served locally often runs on a CPU, where one call with a long prompt takes minutes:
it deserves a longer default timeout than a hosted model. Decided from the call's options
alone, without a name lookup (which could block): the ``api_base`` host when there is one,
else the provider of the model string.

A leaf module: standard library only, nothing from the ``ai`` package.
"""

import ipaddress
from urllib.parse import urlsplit

# Providers that serve models on the caller's machine unless an api_base says otherwise.
LOCAL_PROVIDERS = frozenset({"ollama", "ollama_chat", "lm_studio", "llamafile"})
# Host names that only a local or private network resolves.
LOCAL_HOST_SUFFIXES = (".localhost", ".local", ".lan", ".internal", ".home.arpa")


def is_local_host(host):
    """Tell whether ``host`` (a name or an address) is loopback, private or link-local."""
    host = (host or "").strip("[]").lower()
    if host == "localhost" or host.endswith(LOCAL_HOST_SUFFIXES):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def is_served_locally(model, api_base=None):
    """Tell whether ``model``, called at ``api_base``, runs locally (see the module's doc)."""
    if api_base:
        try:
            return is_local_host(urlsplit(api_base).hostname)
        except ValueError:
            return False
    return (model or "").split("/", 1)[0] in LOCAL_PROVIDERS
