import urllib.request as ur
import requests

raw = ur.urlopen("https://example.org/a.json").read()
r = requests.get("https://example.org/b.json", timeout=10)
