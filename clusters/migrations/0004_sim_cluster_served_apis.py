from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('clusters', '0003_cluster_inventory_at'),
    ]

    operations = [
        migrations.AddField(
            model_name='cluster',
            name='served_apis',
            field=models.JSONField(blank=True, default=list, help_text="Group-versions the cluster's discovery serves (read with the inventory; empty: not read yet)."),
        ),
    ]
