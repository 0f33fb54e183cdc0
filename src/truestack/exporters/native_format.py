"""truestack's own saved profile format (see truestack.model.storage)."""

from ..model import Profile
from ..model.storage import dumps


def export(profile: Profile) -> bytes:
    return dumps(profile)
