"""Robot descriptions: URDF generated from a MuJoCo model, and MuJoCo models from URDF."""
