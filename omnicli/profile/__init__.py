"""Profiles: YAML files selecting every engine setting (see docs/profiles.md).

    resolved = load_profile("high_concurrency", overrides=["codec.max_num_seqs=32"])
    resolved.profile.codec.generation_min_batch_size, resolved.digest
"""

from omnicli.profile.errors import ProfileError
from omnicli.profile.loader import load_profile
from omnicli.profile.platform import detect_platform
from omnicli.profile.presets import PresetInfo, list_presets, presets_dir
from omnicli.profile.resolved import ResolvedProfile, diff_profiles, leaf_keys
from omnicli.profile.schema import CodecStageConfig, Profile, RetentionConfig, TalkerConfig, check_platform

__all__ = [
    "CodecStageConfig",
    "PresetInfo",
    "Profile",
    "ProfileError",
    "ResolvedProfile",
    "RetentionConfig",
    "TalkerConfig",
    "check_platform",
    "detect_platform",
    "diff_profiles",
    "leaf_keys",
    "list_presets",
    "load_profile",
    "presets_dir",
]
