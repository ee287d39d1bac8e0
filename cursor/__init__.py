"""cursor"""
