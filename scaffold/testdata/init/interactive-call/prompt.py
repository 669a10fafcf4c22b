import os
n = int(input("How many draws? "))
os.chdir("/home/alice/project")
