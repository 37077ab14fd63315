"""TEST FIXTURE, not PyTorch."""
git_version = "fixture0000000"
