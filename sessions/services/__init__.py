"""Write-side services: named `<entity>_<action>`, keyword-only, atomic where they write."""
